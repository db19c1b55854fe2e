"""A base agent whose helper casts a tensor on the host (pymic's NetRunAgent)."""


class NetRunAgent:
    def __init__(self, config):
        self.tensor_type = config["tensor_type"]
        self.device = config["device"]

    def convert_tensor_type(self, input_tensor):
        if self.tensor_type == "float":
            return input_tensor.float()
        return input_tensor.double()

    def send(self, input_tensor):
        return input_tensor.to(self.device)  # moves: what it returns is on the device
