// DType <-> DLPack codes, and what from_dlpack refuses before it touches the device.
#include <gtest/gtest.h>

#include <dlpack/dlpack.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessel/DType.hpp"
#include "tessel/Error.hpp"
#include "tessel/runtime/Tensor.hpp"

namespace tessel {
namespace {

constexpr DType kAll[] = {DType::f16, DType::bf16, DType::f32, DType::f64,    DType::i8,
                          DType::u8,  DType::i32,  DType::i64, DType::boolean};

TEST(DLPack, DTypeCodesRoundTrip) {
  for (DType t : kAll) {
    EXPECT_EQ(dtype_from_dlpack(dlpack_code(t), dlpack_bits(t)), t) << dtype_name(t);
    EXPECT_EQ(dlpack_bits(t), dtype_bytes(t) * 8) << dtype_name(t);
  }
  EXPECT_EQ(dlpack_code(DType::f16), kDLFloat);
  EXPECT_EQ(dlpack_code(DType::bf16), kDLBfloat);
  EXPECT_EQ(dlpack_code(DType::i32), kDLInt);
  EXPECT_EQ(dlpack_code(DType::u8), kDLUInt);
  EXPECT_EQ(dlpack_code(DType::boolean), 6);  // kDLBool, newer than the DLPack 0.6 header
  EXPECT_FALSE(dtype_from_dlpack(kDLComplex, 64).has_value());
  EXPECT_FALSE(dtype_from_dlpack(kDLFloat, 8).has_value());
}

struct FakeExport {
  DLManagedTensor managed{};
  std::int64_t shape[2] = {2, 3};
  int deleted = 0;
};

DLManagedTensor* make_fake(FakeExport& e, DLDeviceType device, DLDataType dtype) {
  e.managed.dl_tensor.data = reinterpret_cast<void*>(0x1000);
  e.managed.dl_tensor.device = DLDevice{device, 0};
  e.managed.dl_tensor.ndim = 2;
  e.managed.dl_tensor.dtype = dtype;
  e.managed.dl_tensor.shape = e.shape;
  e.managed.manager_ctx = &e;
  e.managed.deleter = [](DLManagedTensor* self) { ++static_cast<FakeExport*>(self->manager_ctx)->deleted; };
  return &e.managed;
}

TEST(DLPack, RejectsHostTensors) {
  FakeExport e;
  try {
    Tensor::from_dlpack(make_fake(e, kDLCPU, DLDataType{kDLFloat, 32, 1}));
    FAIL();
  } catch (const RuntimeError& err) {
    EXPECT_NE(std::string(err.what()).find("device type 1 (kDLCPU)"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("kDLCUDA"), std::string::npos) << err.what();
  }
  EXPECT_EQ(e.deleted, 0);  // not consumed on error
}

TEST(DLPack, RejectsUnknownDTypes) {
  FakeExport e;
  try {
    Tensor::from_dlpack(make_fake(e, kDLCUDA, DLDataType{kDLComplex, 64, 1}));
    FAIL();
  } catch (const RuntimeError& err) {
    EXPECT_NE(std::string(err.what()).find("dtype code 5, 64 bits"), std::string::npos) << err.what();
  }
  FakeExport v;
  EXPECT_THROW(Tensor::from_dlpack(make_fake(v, kDLCUDA, DLDataType{kDLFloat, 32, 4})),
               RuntimeError);  // vector lanes
  EXPECT_EQ(e.deleted + v.deleted, 0);
}

TEST(DLPack, ImportOwnsAndReleases) {
  // A device pointer is never dereferenced by from_dlpack, so this runs without a GPU.
  FakeExport e;
  {
    Tensor t = Tensor::from_dlpack(make_fake(e, kDLCUDA, DLDataType{kDLBfloat, 16, 1}));
    EXPECT_EQ(t.dtype(), DType::bf16);
    EXPECT_EQ(t.shape(), (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(t.strides(), (std::vector<std::int64_t>{3, 1}));  // NULL strides: row-major
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.data_ptr(), reinterpret_cast<void*>(0x1000));
    EXPECT_EQ(t.describe(), "bf16[2, 3] on cuda:0");
    Tensor copy = t;
    Tensor col = t.slice(1, 1, 2);
    EXPECT_FALSE(col.is_contiguous());
    EXPECT_EQ(col.device_ptr(), 0x1000u + 2);
    EXPECT_EQ(col.describe(), "bf16[2, 1] strides [3, 1] on cuda:0");
    EXPECT_EQ(e.deleted, 0);
  }
  EXPECT_EQ(e.deleted, 1);  // exactly once, with the last reference
}

TEST(DLPack, ExportOfAView) {
  Tensor v = Tensor::view_of(0x2000, {4, 8}, DType::f16).slice(0, 1, 3);
  DLManagedTensor* m = v.to_dlpack();
  EXPECT_EQ(m->dl_tensor.data, reinterpret_cast<void*>(0x2000 + 8 * 2));
  EXPECT_EQ(m->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCUDA);
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.shape[0], 2);
  EXPECT_EQ(m->dl_tensor.strides[0], 8);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLFloat);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 16);
  m->deleter(m);
}

TEST(HostElements, StoreAndLoad) {
  unsigned char buf[8];
  store_host_element(1.5, DType::f16, buf);
  EXPECT_EQ(buf[0] | (buf[1] << 8), 0x3e00);
  EXPECT_EQ(load_host_element(buf, DType::f16), 1.5);
  store_host_element(-3.0, DType::bf16, buf);
  EXPECT_EQ(load_host_element(buf, DType::bf16), -3.0);
  store_host_element(-7, DType::i8, buf);
  EXPECT_EQ(load_host_element(buf, DType::i8), -7);
  store_host_element(1e12, DType::i64, buf);
  EXPECT_EQ(load_host_element(buf, DType::i64), 1e12);
  store_host_element(0.1, DType::f64, buf);
  EXPECT_EQ(load_host_element(buf, DType::f64), 0.1);
  EXPECT_THROW(store_host_element(NAN, DType::i32, buf), RuntimeError);
  EXPECT_THROW(store_host_element(300, DType::u8, buf), RuntimeError);
}

}  // namespace
}  // namespace tessel
