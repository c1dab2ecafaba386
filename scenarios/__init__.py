"""Scenario files shipped with mcsim, installed as the package data of ``mcsim.scenarios``."""
