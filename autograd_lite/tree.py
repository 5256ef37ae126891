"""Pytrees: nested NamedTuples, tuples, lists and dicts with arrays (or anything else) as leaves.

Parameters, gradients and optimizer states are all pytrees of one shape, so an
optimizer is a `tree_map` and a gradient comes back in the structure of its
argument. Containers are rebuilt with their own types (a NamedTuple stays that
NamedTuple); dicts keep their key order.
"""


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def children(tree):
    """The child subtrees of a container, or None for a leaf."""
    if isinstance(tree, (tuple, list)):
        return list(tree)
    if isinstance(tree, dict):
        return list(tree.values())
    return None


def rebuild(like, new_children):
    """A container of the type (and fields or keys) of `like` holding `new_children`."""
    if is_namedtuple(like):
        return type(like)(*new_children)
    if isinstance(like, dict):
        return type(like)(zip(like.keys(), new_children))
    return type(like)(new_children)


def _child_names(tree):
    """How each child is addressed in a path: '.field', '[i]' or "['key']"."""
    if is_namedtuple(tree):
        return ["." + f for f in tree._fields]
    if isinstance(tree, dict):
        return [f"[{k!r}]" for k in tree.keys()]
    return [f"[{i}]" for i in range(len(tree))]


def _check_same_container(path, tree, other):
    if (type(other) is not type(tree) or len(other) != len(tree)
            or (isinstance(tree, dict) and list(other.keys()) != list(tree.keys()))):
        raise ValueError(f"tree_map: trees differ at '{path.lstrip('.') or '(root)'}': "
                         f"{type(tree).__name__} of {len(tree)} vs {type(other).__name__}"
                         f"{' of ' + str(len(other)) if hasattr(other, '__len__') else ''}")


def tree_map(f, tree, *others, path=""):
    """f applied to every leaf of `tree` (with the matching leaves of `others`), same structure."""
    kids = children(tree)
    if kids is None:
        return f(tree, *others)
    for other in others:
        _check_same_container(path, tree, other)
    other_kids = [children(o) for o in others]
    names = _child_names(tree)
    return rebuild(tree, [tree_map(f, kid, *(ok[i] for ok in other_kids), path=path + names[i])
                          for i, kid in enumerate(kids)])


def tree_leaves(tree):
    """The leaves in order (depth first, fields in declaration order)."""
    out = []
    stack = [tree]
    while stack:
        node = stack.pop()
        kids = children(node)
        if kids is None:
            out.append(node)
        else:
            stack.extend(reversed(kids))
    return out


def tree_paths(tree, root=""):
    """A path string for each leaf, in the order of `tree_leaves`: 'encoder[0].attn.wq'."""
    out = []
    stack = [(root, tree)]
    while stack:
        path, node = stack.pop()
        kids = children(node)
        if kids is None:
            out.append(path.lstrip(".") if not root else path)
        else:
            stack.extend(reversed([(path + name, kid) for name, kid in zip(_child_names(node), kids)]))
    return out


def tree_unflatten(like, leaves):
    """The structure of `like` with its leaves replaced, in order, by `leaves`."""
    it = iter(leaves)

    def next_leaf(_):
        leaf = next(it, it)
        if leaf is it:
            raise ValueError("tree_unflatten: fewer leaves than the structure holds")
        return leaf
    result = tree_map(next_leaf, like)
    if next(it, it) is not it:
        raise ValueError("tree_unflatten: more leaves than the structure holds")
    return result
