"""Exact AUROC and AUPR by secure three-party computation (ppAURORA, placeholder docstring)."""
