# install rules: written with the runtime
