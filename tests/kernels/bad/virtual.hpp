// Bad kernel: a virtual call.
struct Activation {
  virtual float apply(float x) const = 0;
};
