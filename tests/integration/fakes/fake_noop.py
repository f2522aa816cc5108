"""Test fake: builds the model with its random init and loads nothing (verification must fail)."""


def load(request):
    with request.probe.phase("build"):
        model = request.target()
    return model, None
