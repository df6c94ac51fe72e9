"""toolspan"""
