// The shared library is kdsl_impl linked whole; this file gives it one source of its own.
