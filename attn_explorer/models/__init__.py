"""attn_explorer.models"""
