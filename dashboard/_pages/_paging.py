"""A pager shared by the pages that list calls, findings or traces."""

from __future__ import annotations

import streamlit as st


def page_offset(total: int, page_size: int, key: str) -> int:
    """Draw a page picker when ``total`` rows need more than one page; return the offset."""
    pages = max(1, -(-total // page_size))
    if pages == 1:
        return 0
    page = st.number_input(f"Page (of {pages:,})", 1, pages, 1, key=key)
    return (int(page) - 1) * page_size
