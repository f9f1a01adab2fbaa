"""Every page in Chinese, opened once: wide, it draws from the app's own server with no chart toolbar over a title;
narrowed to a projector, nothing is cut, too wide or broken (tests/every_page.py). A file a language, so that
pytest-xdist gives each its own worker."""
import pytest
from every_page import GROUPS, check_pages


@pytest.mark.parametrize("group", GROUPS)
def test_every_page_draws_from_the_apps_own_server_with_no_toolbar_over_a_title_and_fits_a_projector(
        app_url, open_page, group):
    check_pages(app_url, open_page, "zh", GROUPS[group])
