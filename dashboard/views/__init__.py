"""The dashboard's pages; each file is a Streamlit script whose `main()` is made of widget calls."""
