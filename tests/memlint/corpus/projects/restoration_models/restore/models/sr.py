from collections import OrderedDict

from .base import BaseModel


class SRModel(BaseModel):
    def optimize_parameters(self, step):
        self.optimizer.zero_grad()
        self.output = self.net(self.lq)
        l_total = 0
        loss_dict = OrderedDict()
        if self.cri_pix:
            l_pix = self.cri_pix(self.output, self.gt)
            l_total += l_pix
            loss_dict["l_pix"] = l_pix
        l_total.backward()
        self.optimizer.step()
        self.log_dict = self.reduce_loss_dict(loss_dict)


class GANModel(BaseModel):
    def optimize_parameters(self, step):
        self.optimizer.zero_grad()
        self.output = self.net(self.lq)
        loss_dict = OrderedDict()
        l_g = self.cri_gan(self.output, self.gt)
        loss_dict["l_g"] = l_g
        l_g.backward()
        self.optimizer.step()
        self.history = self.gather_losses(loss_dict)  # expect: MEM001
