// LangChain.js + OpenLLMetry: see langchainjs.mjs.
//   node langchainjs_openllmetry.mjs on|off OUT.jsonl
import { main } from "./langchainjs.mjs";

await main("openllmetry", ...process.argv.slice(2));
