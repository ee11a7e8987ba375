"""Renderers: they read a RunResult (or its JSON) and never measure anything."""
