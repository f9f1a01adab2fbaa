"""The one line between a user's mistake and a bug.

Every problem a person can cause and fix (a bad file, setting, name or checkpoint; a job already running;
a run that diverged under their hyperparameters) raises a `UserError` whose message is written for them.
The CLI and the app show those messages as they are; anything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A mistake the user can fix; str(error) is a sentence for a person."""


class InputError(UserError, ValueError):
    """A text, prompt or sampling setting that cannot be used as given."""
