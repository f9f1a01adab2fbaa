"""The app's pages in learning order: section → [(page file stem, Material icon)].

app.py builds the navigation from it; titles come from the catalogs (`app.sections.*`, `app.pages.*`).
"""
SECTIONS = {
    "start": [("home", "route")],
    "concepts": [("averaging_to_attention", "functions"), ("sqrt_d_scaling", "straighten"),
                 ("multihead_order", "shuffle"), ("rope", "rotate_right"), ("ffn_swiglu", "call_split"),
                 ("residual_norm", "stacked_line_chart"), ("assembled_gpt", "account_tree"),
                 ("hyperparameters", "tune"), ("faster_training", "speed"), ("recap", "flag")],
    "lab": [("training", "model_training"), ("inspector", "biotech"), ("trace", "timeline")],
}
DEFAULT_PAGE = "home"
PAGE_STEMS = [stem for pages in SECTIONS.values() for stem, _ in pages]
