"""attn_explorer.tools"""
