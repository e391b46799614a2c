"""The privacy ledger and budgets, shared by every engine."""
