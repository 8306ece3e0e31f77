"""Remediation: fixes as typed actions rendered to exact commands, previewed,
confirmed, run and journaled. Never imports Textual."""
