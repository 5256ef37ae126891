"""Helpers shared by the tests, one module per kind of reference:

    helpers.references   central differences (first and second order), closeness, PyTorch
                         comparison of ops, the paper's position encoding written out
    helpers.torch_models PyTorch layers holding our blocks' weights (through
                         models.torch_bridge) and gradient comparison by torch's names
    helpers.tiny_models  small, seeded models of each family and their token batches
    helpers.search       plain reference searches for the decoding tests
    helpers.pictures     the SVG a picture renders to, and the engine's own op count
"""
