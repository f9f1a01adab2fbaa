"""The single-choice quizzes of the concept pages: the right option is called right, a wrong one is not."""
import pytest
from page_helpers import answer, run_page


@pytest.mark.parametrize("page, quiz, right, wrong", [
    ("assembled_gpt", "gpt-view", "It raises an error", "Same result; view is just faster."),
    ("ffn_swiglu", "ffn-dff", "8/3·d_model", "4·d_model"),
])
def test_quiz_says_right_and_wrong(page, quiz, right, wrong):
    at = run_page(f"{page}.py")
    answer(at, quiz, right)
    at.button(key=f"{quiz}-check").click().run()
    assert at.success and at.success[0].value.startswith("Right.")
    answer(at, quiz, wrong)
    at.button(key=f"{quiz}-check").click().run()
    assert not at.success and any(e.value.startswith("Not quite.") for e in at.error)
