"""The disk side of the workspace rule (`events/workspaces.py`): resolving the
paths it decides on, and the copy a run works in."""
