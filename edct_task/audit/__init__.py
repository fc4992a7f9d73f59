"""The audit report: a run's records as static HTML pages (``edct audit``)."""

from edct_task.audit.report import AuditSummary, write_audit

__all__ = ["AuditSummary", "write_audit"]
