"""The stand-in family's one meaning."""

from fp8ref.harness.profiles.key_meanings import KeyMeaning

OWNS = ("standin",)
MEANINGS = (
    KeyMeaning(
        "standin.*.saturates",
        "stand-in family",
        "what 600 becomes in {1}",
        "a stand-in consequence for the upgrade report",
        "numerics",
    ),
)
