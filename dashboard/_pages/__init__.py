"""The dashboard's pages; Streamlit runs each file as a script via ``st.navigation``."""
