"""Adversarial attacks on federated learning as pure rules (NumPy only, no FLARE, no torch): FedCAP's seven
(``updates``), the adaptive searches (``adaptive``), the peer-to-peer attacker's arithmetic (``peer``) and the one
checker of an attack's settings (``settings``).
"""
