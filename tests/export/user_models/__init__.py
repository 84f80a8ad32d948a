"""Attention RNN translation models written the way users write them (not with this
project's ``models`` package), each with its own training loop, its own greedy decoding
loop and a ``load()`` returning an :class:`export.user.UserModel`:

* :mod:`.bahdanau_gru`: GRU encoder over packed sequences + Bahdanau decoder step;
* :mod:`.luong_lstm`: bidirectional LSTM + bridge + Luong general attention with input
  feeding and an explicit source mask, returning log-probs;
* :mod:`.pytorch_tutorial`: the PyTorch "NLP From Scratch" translation tutorial's
  ``EncoderRNN``/``AttnDecoderRNN``;
* :mod:`.bentrevett_time_major` and :mod:`.bentrevett_packed`: bentrevett/pytorch-seq2seq's
  attention notebooks (sequence-first; the second packs sorted batches);
* :mod:`.d2l_bahdanau`: Dive into Deep Learning's Bahdanau model (a list state, the
  attention kept in an attribute, sources padded to a fixed width).

Used by ``tests/export/test_user_models.py``.
"""
