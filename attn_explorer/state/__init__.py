"""attn_explorer.state"""
