"""Adversarial attacks on federated learning as pure rules (NumPy only, no FLARE, no torch).

``updates``: the seven attacks FedCAP evaluates; ``adaptive``: the step search behind adaptive
attacks (and the attack on Krum); ``detection``: the detection metrics DAcc, FPR, FNR.
"""
