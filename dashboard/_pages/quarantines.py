"""Quarantines: the calls a live finding stopped fleet-wide, and lifting them.

The store comes from ``toolspan dashboard --store`` (or ``TOOLSPAN_STORE``, or
``toolspan serve --enforce``). Lifting asks for a confirmation first: a lifted
quarantine lets the model's calls through again at once, on every executor.
"""

from __future__ import annotations

import streamlit as st

from toolspan.dashboard import ui

PICK_KEY = "quarantine_pick"
CONFIRM_KEY = "quarantine_confirm"
RESULT_KEY = "quarantine_result"


def _lift(location: str, every: bool) -> None:
    """Button callback: lift the picked quarantines (or every one), before the
    page lists them again, and keep what happened for this run to show."""
    picked = set(st.session_state.get(PICK_KEY) or ())
    if not st.session_state.get(CONFIRM_KEY):
        st.session_state[RESULT_KEY] = ("warning", "Tick the confirmation to lift.")
        return
    if not every and not picked:
        st.session_state[RESULT_KEY] = ("warning", "Choose the quarantines to lift first.")
        return
    try:
        lifted = ui.lift_quarantines(location, None if every else picked)
    except ui.QuarantineStoreError as exc:
        st.session_state[RESULT_KEY] = ("error", str(exc))
        return
    gone = 0 if every else len(picked) - len(lifted)
    note = f" ({gone} had expired or been lifted already)" if gone > 0 else ""
    st.session_state[RESULT_KEY] = ("success", f"Lifted {len(lifted)} quarantine(s){note}.")
    st.session_state[PICK_KEY] = []
    st.session_state[CONFIRM_KEY] = False


_SHOW = {"error": st.error, "warning": st.warning, "success": st.success}

st.header("Quarantines")
result = st.session_state.pop(RESULT_KEY, None)
if result is not None:  # first: a store that failed the lift fails the listing too
    kind, message = result
    _SHOW[kind](message)  # the page's own words and a store error, never trace text
location, frame = ui.quarantines()
st.caption(
    "Calls every executor sharing this store refuses with status `quarantined`, written "
    "by `toolspan serve --enforce` from live findings. The store:"
)
st.text(ui.store_label(location))  # a path or URL someone typed: text, not Markdown
if frame.empty:
    st.info("No quarantine is in force.")
    st.stop()

st.metric("In force", f"{len(frame):,}")
st.dataframe(frame, hide_index=True)

st.subheader("Lift")
ids = [str(i) for i in frame["id"]]
# A pick that expired meanwhile is no option any more: drop it, not the page.
st.session_state[PICK_KEY] = [i for i in st.session_state.get(PICK_KEY) or () if i in ids]
st.multiselect("Quarantines to lift (by id)", ids, key=PICK_KEY)
st.checkbox("Confirm: the calls they stop run again at once, on every executor", key=CONFIRM_KEY)
left, right = st.columns(2)
left.button("Lift the chosen", on_click=_lift, args=(location, False), key="lift_chosen")
right.button(f"Lift all {len(ids)}", on_click=_lift, args=(location, True), key="lift_all")
