"""Resemblyzer's speaker encoder, copied from Resemblyzer 0.1.4 (resemblyzer/voice_encoder.py, class VoiceEncoder)
so that it runs without the package: the hyperparameters of resemblyzer/hparams.py are inlined, and __init__ keeps
only the layers (the package's also picks a device and loads resemblyzer/pretrained.pt itself, with
`load_state_dict(checkpoint["model_state"], strict=False)`). `build()` returns the bare network; the weights are
the wheel's pretrained.pt, a training script's checkpoint {"step", "model_state", "optimizer_state"}.
Input: 160 frames x 40 mel channels (power, not log: resemblyzer.audio.wav_to_mel_spectrogram); output: a
256-d speaker embedding, ReLU'd and L2-normalised.

Apache License 2.0, Copyright 2019 Resemble.AI; by Corentin Jemine (https://github.com/resemble-ai/Resemblyzer).
"""

import torch
from torch import nn

mel_n_channels = 40  # resemblyzer/hparams.py
model_hidden_size = 256
model_embedding_size = 256
model_num_layers = 3


def build():
    return VoiceEncoder().eval()


class VoiceEncoder(nn.Module):
    def __init__(self):
        super().__init__()

        # Define the network
        self.lstm = nn.LSTM(mel_n_channels, model_hidden_size, model_num_layers, batch_first=True)
        self.linear = nn.Linear(model_hidden_size, model_embedding_size)
        self.relu = nn.ReLU()

    def forward(self, mels: torch.FloatTensor):
        """
        Computes the embeddings of a batch of utterance spectrograms.

        :param mels: a batch of mel spectrograms of same duration as a float32 tensor of shape
        (batch_size, n_frames, n_channels)
        :return: the embeddings as a float 32 tensor of shape (batch_size, embedding_size).
        Embeddings are positive and L2-normed, thus they lay in the range [0, 1].
        """
        # Pass the input through the LSTM layers and retrieve the final hidden state of the last
        # layer. Apply a cutoff to 0 for negative values and L2 normalize the embeddings.
        _, (hidden, _) = self.lstm(mels)
        embeds_raw = self.relu(self.linear(hidden[-1]))
        return embeds_raw / torch.norm(embeds_raw, dim=1, keepdim=True)
