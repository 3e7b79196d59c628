"""The torch layer: the torch this process imported, every private torch and onnxscript API
behind one interface, the speed patches and shortcuts with their off switches, and the
toolchain's status."""
