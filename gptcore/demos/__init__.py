"""Pure functions behind the concept pages: each returns tensors or DataFrames for a page to plot."""
