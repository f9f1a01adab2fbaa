"""The app layer: everything that imports Streamlit or Plotly. Pages under app_pages/ are thin scripts over it."""
