// LangChain.js + OpenInference: see langchainjs.mjs.
//   node langchainjs_openinference.mjs on|off OUT.jsonl
import { main } from "./langchainjs.mjs";

await main("openinference", ...process.argv.slice(2));
