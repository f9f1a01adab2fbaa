"""The app layer: everything that imports Streamlit or Plotly. Pages under pages/ are thin scripts over it."""
