"""fp8ref.reference.optim_state: the FP8 optimizer state formula on values worked by hand."""

import pytest
import torch

from fp8ref.reference.optim_state import dequantize_state, quantize_state


def test_a_block_is_scaled_by_its_amax_over_448_and_rounded_to_e4m3():
    # amax 896: scale 2; 896/2 = 448 (0x7E), 1/2 = 0.5 (0x30), -3/2 = -1.5 (0xBC), 0 (0x00);
    # second block all zero: scale 1e-12 / 448, codes 0
    x = torch.tensor([896.0, 1.0, -3.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    codes, scale = quantize_state(x, 4)
    assert codes.tolist() == [0x7E, 0x30, 0xBC, 0x00, 0, 0, 0, 0]
    assert scale.tolist() == [2.0, torch.tensor(1e-12 / 448, dtype=torch.float32).item()]
    assert dequantize_state(codes, scale).tolist() == x.tolist()


def test_an_element_between_two_codes_rounds_to_nearest_even():
    # scale 1 (amax 448): 17 is a tie between 16 (0x58) and 18 (0x59): the even one, 16
    codes, _ = quantize_state(torch.tensor([448.0, 17.0, 17.5, 0.0]), 4)
    assert codes.tolist()[1:3] == [0x58, 0x59]


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="x: 6 elements do not split into blocks of 4"):
        quantize_state(torch.zeros(6), 4)
    with pytest.raises(TypeError, match="x: expected"):
        quantize_state(torch.zeros(4, dtype=torch.float64), 4)
    with pytest.raises(ValueError, match="block_size"):
        quantize_state(torch.zeros(4), 0)
    with pytest.raises(ValueError, match="scale: expected one value per block"):
        dequantize_state(torch.zeros(6, dtype=torch.uint8), torch.ones(4))
