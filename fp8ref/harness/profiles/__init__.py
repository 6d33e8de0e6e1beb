"""The behaviour profile: collecting it, its file format, the goldens it is held to, what each key
means, and the upgrade report a reviewer reads."""
