"""sinks/tracking"""
