"""The toolspan dashboard (``streamlit run``'s entry script).

Streamlit runs this file as a script, so it imports the package absolutely.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from toolspan.dashboard import _live, _ui

_PAGES = Path(__file__).with_name("_pages")


def main() -> None:
    st.set_page_config(page_title="toolspan", layout="wide")
    database = _ui.connection()
    _live.follow(_ui.TRACE_KEY, database)
    _ui.render_sidebar()
    navigation = st.navigation(
        [
            st.Page(_PAGES / "overview.py", title="Overview", default=True),
            st.Page(_PAGES / "timelines.py", title="Retry timelines"),
            st.Page(_PAGES / "findings.py", title="Findings"),
            st.Page(_PAGES / "quarantines.py", title="Quarantines"),
            st.Page(_PAGES / "trace.py", title="Trace view"),
            st.Page(_PAGES / "console.py", title="SQL console"),
        ]
    )
    navigation.run()


main()
