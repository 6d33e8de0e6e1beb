"""The stand-in family's one meaning."""

from fp8ref.harness.profiles.key_meanings import KeyMeaning

OWNS = ("standin",)
MEANINGS = (
    KeyMeaning(
        "standin.*.exact_value",
        "stand-in family",
        "what 1.125 becomes in {1}",
        "a stand-in consequence for the upgrade report",
        "numerics",
    ),
)
