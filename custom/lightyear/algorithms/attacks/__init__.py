"""Adversarial attacks on federated learning as pure rules (NumPy only, no FLARE, no torch).

``updates``: the seven attacks FedCAP evaluates; ``adaptive``: the step search behind adaptive
attacks (and the attack on Krum); ``peer``: an attacking peer's update arithmetic in the
peer-to-peer topology; ``settings``: the one checker of an attack's settings; ``detection``: the
detection metrics DAcc, FPR, FNR.
"""
