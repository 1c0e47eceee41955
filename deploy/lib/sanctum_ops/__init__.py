"""Shared pieces of sanctum's operations scripts (deploy, guardian, canary, drift, parity smoke,
integrity). Python 3 standard library only: production runs them with Debian's /usr/bin/python3."""
