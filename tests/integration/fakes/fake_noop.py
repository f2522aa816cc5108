"""Test fake: builds the model with its random init and loads nothing (verification must fail)."""


def load(builder, path, probe, args, options):
    with probe.phase("build"):
        model = builder()
    return model, None
