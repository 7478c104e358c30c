"""The model dock's Compare page (issue 35): two prompts, patching, attribution."""
