"""Simulation platform: hard-IP model, host, links, runner glue and measurement helpers."""
