"""Helpers that the course's tests and graders import: grading devices, checks, messages."""
from .devices import grading_devices, has_data, same_device
from .messages import message, text

__all__ = ["grading_devices", "has_data", "same_device", "message", "text"]
