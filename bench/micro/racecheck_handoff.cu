// Does compute-sanitizer racecheck see the hand-offs svdq's sm_90a programs use as synchronization? Run under
// `compute-sanitizer --tool racecheck`; each hand-off is its own kernel, so a report names the kind that raised it.
// A producer warp fills a 2-slot ring for 8 rounds, a consumer warp (eight in the _w8 kernels) reads each slot and frees it:
//   k_mbar_st_ld      st.shared, mbarrier.arrive (release) / try_wait.parity (acquire), ld.shared
//   k_mbar_st_ldm     the same with ldmatrix on the consumer side
//   k_elect_st_ldm    st.shared, __syncwarp, one elected lane's mbarrier.arrive (count 1) / try_wait.parity, ldmatrix,
//                     the slot freed the same way (the FP16 tile hand-off of the swap-AB program)
//   k_bulk_ld         cp.async.bulk (1-D, complete_tx on the mbarrier) into the slot, ld.shared (the scale bytes)
//   k_elect_bulk_ld   the same, the slot freed by __syncwarp and one elected lane's arrival (the swap-AB program's
//                     ring slots)
//   k_elect_bulk_ld_w8  k_elect_bulk_ld with 8 reader warps, each freeing the slot by its lane 0 (the ws program's
//                     packed-A slots: 8 consumer warps), and k_bulk_ld_w8 the same with every lane arriving
//   k_tensor_ld       cp.async.bulk.tensor (2-D TMA) into the slot, ld.shared
//   k_barsync         st.shared, bar.sync, ld.shared: a hand-off racecheck is known to model (must be clean)
//   k_none            st.shared and ld.shared with no hand-off at all (a real race: must be reported)
// The kernels also check the values they read, so a hand-off that does not order the accesses shows as a mismatch.
// Build: nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I kernels bench/micro/racecheck_handoff.cu
#include <cstdio>
#include <vector>

#include "common/sm80_ptx.cuh"
#include "common/sm90_async.cuh"
#include "micro_util.hpp"

using namespace svdq_k;

constexpr int kRounds = 8, kSlots = 2, kSlotBytes = 1024;  // a slot: 8 rows x 128 bytes (one 8x64 BF16 tile)

struct Ring {
  u32 data, full, empty;  // shared addresses: kSlots slots, kSlots full and kSlots empty barriers
};
__device__ Ring ring_setup(unsigned char* smem, u32 full_count, u32 empty_count = 32) {
  Ring r{smem_addr(smem), smem_addr(smem + kSlots * kSlotBytes), smem_addr(smem + kSlots * kSlotBytes + 8 * kSlots)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) {
      mbar_init(r.full + 8 * s, full_count);
      mbar_init(r.empty + 8 * s, empty_count);
    }
    mbar_init_fence();
  }
  __syncthreads();
  return r;
}
__host__ __device__ u32 expected(int round, int word) { return 0x9E3779B9u * (round + 1) + word; }
// The calling warp's arrival on `bar`: every lane (a barrier of count 32), or ELECT: lane 0 after __syncwarp (count 1).
template <bool ELECT>
__device__ void warp_arrive(u32 bar) {
  if (ELECT) {
    __syncwarp();
    if ((threadIdx.x & 31) == 0) mbar_arrive(bar);
  } else {
    mbar_arrive(bar);
  }
}
// The producer's wait until the consumer has freed slot `round % kSlots` of round `round - kSlots`.
__device__ void wait_free(const Ring& r, int round) {
  if (round >= kSlots) mbar_wait(r.empty + 8 * (round % kSlots), ((round / kSlots) - 1) & 1);
}

// The consumer side: warp 1 reads its round's slot (ld.shared or ldmatrix), counts mismatches, frees the slot.
template <bool LDMATRIX, bool ELECT = false>
__device__ void consume(const Ring& r, int* bad) {
  const int lane = threadIdx.x & 31;
  for (int round = 0; round < kRounds; ++round) {
    const int s = round % kSlots;
    mbar_wait(r.full + 8 * s, (round / kSlots) & 1);
    const u32 slot = r.data + s * kSlotBytes;
    if (LDMATRIX) {  // x4: four 8x8 b16 matrices = 16-byte rows 0..31 of the slot, thread t gets word t % 4 of row t / 4
      u32 v[4];
      ldmatrix_x4(slot + lane * 16, v[0], v[1], v[2], v[3]);
      for (int i = 0; i < 4; ++i) {
        const int row16 = i * 8 + lane / 4, word = row16 * 4 + lane % 4;
        if (v[i] != expected(round, word)) atomicAdd(bad, 1);
      }
    } else {
      for (int w = lane; w < kSlotBytes / 4; w += 32) {
        u32 v;
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(slot + 4 * w));
        if (v != expected(round, w)) atomicAdd(bad, 1);
      }
    }
    warp_arrive<ELECT>(r.empty + 8 * s);
  }
}
__device__ void store_slot(u32 slot, int round) {
  for (int w = threadIdx.x & 31; w < kSlotBytes / 4; w += 32)
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(slot + 4 * w), "r"(expected(round, w)) : "memory");
}

template <bool LDMATRIX, bool ELECT>
__device__ void st_ld_impl(int* bad) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const Ring r = ring_setup(smem, ELECT ? 1 : 32, ELECT ? 1 : 32);
  if (threadIdx.x < 32) {
    for (int round = 0; round < kRounds; ++round) {
      wait_free(r, round);
      store_slot(r.data + (round % kSlots) * kSlotBytes, round);
      warp_arrive<ELECT>(r.full + 8 * (round % kSlots));
    }
  } else {
    consume<LDMATRIX, ELECT>(r, bad);
  }
}
__global__ void k_mbar_st_ld(int* bad) { st_ld_impl<false, false>(bad); }
__global__ void k_mbar_st_ldm(int* bad) { st_ld_impl<true, false>(bad); }
__global__ void k_elect_st_ldm(int* bad) { st_ld_impl<true, true>(bad); }

// src: kRounds slots' words in global memory, written by the host. READERS consumer warps (threads 32..) each read
// the whole slot and free it (the empty barrier counts every reader warp's arrival).
template <bool ELECT, int READERS = 1>
__device__ void bulk_ld_impl(const u32* src, int* bad) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const Ring r = ring_setup(smem, 1, READERS * (ELECT ? 1 : 32));
  if (threadIdx.x < 32) {
    for (int round = 0; round < kRounds; ++round) {
      const int s = round % kSlots;
      wait_free(r, round);
      if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(r.full + 8 * s, kSlotBytes);
        bulk_load(r.data + s * kSlotBytes, src + round * (kSlotBytes / 4), kSlotBytes, r.full + 8 * s);
      }
      __syncwarp();
    }
  } else {
    consume<false, ELECT>(r, bad);
  }
}
__global__ void k_bulk_ld(const u32* src, int* bad) { bulk_ld_impl<false>(src, bad); }
__global__ void k_elect_bulk_ld(const u32* src, int* bad) { bulk_ld_impl<true>(src, bad); }
__global__ void k_elect_bulk_ld_w8(const u32* src, int* bad) { bulk_ld_impl<true, 8>(src, bad); }
__global__ void k_bulk_ld_w8(const u32* src, int* bad) { bulk_ld_impl<false, 8>(src, bad); }
__global__ void k_tensor_ld(const __grid_constant__ CUtensorMap map, int* bad) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const Ring r = ring_setup(smem, 1);
  if (threadIdx.x < 32) {
    for (int round = 0; round < kRounds; ++round) {
      const int s = round % kSlots;
      wait_free(r, round);
      if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(r.full + 8 * s, kSlotBytes);
        tma_load_2d(r.data + s * kSlotBytes, reinterpret_cast<const TmaDesc*>(&map), 0, round * 8, r.full + 8 * s);
      }
      __syncwarp();
    }
  } else {
    consume<false>(r, bad);
  }
}
__global__ void k_barsync(int* bad) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const u32 slot = smem_addr(smem);
  for (int round = 0; round < kRounds; ++round) {
    if (threadIdx.x < 32) store_slot(slot, round);
    __syncthreads();
    if (threadIdx.x >= 32)
      for (int w = threadIdx.x & 31; w < kSlotBytes / 4; w += 32) {
        u32 v;
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(slot + 4 * w));
        if (v != expected(round, w)) atomicAdd(bad, 1);
      }
    __syncthreads();
  }
}
__global__ void k_none(int* bad) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const u32 slot = smem_addr(smem);
  if (threadIdx.x < 32) {
    store_slot(slot, 0);
  } else {
    u32 v, sum = 0;
    for (int w = threadIdx.x & 31; w < kSlotBytes / 4; w += 32) {
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(slot + 4 * w));
      sum += v;
    }
    if (sum == 1u) atomicAdd(bad, 0);  // keeps the loads
  }
}

int main() {
  std::vector<u32> host(kRounds * kSlotBytes / 4);
  for (int round = 0; round < kRounds; ++round)
    for (int w = 0; w < kSlotBytes / 4; ++w) host[round * (kSlotBytes / 4) + w] = expected(round, w);
  u32* src = nullptr;
  int* bad = nullptr;
  check(cudaMalloc(&src, host.size() * 4), "cudaMalloc src");
  check(cudaMalloc(&bad, sizeof(int)), "cudaMalloc bad");
  check(cudaMemcpy(src, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "copy src");
  // The same bytes as a [kRounds * 8, 128] byte tensor, one 8 x 128 box per round.
  const CUtensorMap map = make_map(src, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, kRounds * 8, 128, 128, 8,
                                   CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE);
  const int smem = kSlots * kSlotBytes + 16 * kSlots;
  struct Run {
    const char* name;
    void (*launch)(int*, const u32*, const CUtensorMap&, int);
  };
  const Run runs[] = {
      {"k_mbar_st_ld", [](int* b, const u32*, const CUtensorMap&, int sm) { k_mbar_st_ld<<<1, 64, sm>>>(b); }},
      {"k_mbar_st_ldm", [](int* b, const u32*, const CUtensorMap&, int sm) { k_mbar_st_ldm<<<1, 64, sm>>>(b); }},
      {"k_elect_st_ldm", [](int* b, const u32*, const CUtensorMap&, int sm) { k_elect_st_ldm<<<1, 64, sm>>>(b); }},
      {"k_bulk_ld", [](int* b, const u32* s, const CUtensorMap&, int sm) { k_bulk_ld<<<1, 64, sm>>>(s, b); }},
      {"k_elect_bulk_ld", [](int* b, const u32* s, const CUtensorMap&, int sm) { k_elect_bulk_ld<<<1, 64, sm>>>(s, b); }},
      {"k_elect_bulk_ld_w8", [](int* b, const u32* s, const CUtensorMap&, int sm) { k_elect_bulk_ld_w8<<<1, 288, sm>>>(s, b); }},
      {"k_bulk_ld_w8", [](int* b, const u32* s, const CUtensorMap&, int sm) { k_bulk_ld_w8<<<1, 288, sm>>>(s, b); }},
      {"k_tensor_ld", [](int* b, const u32*, const CUtensorMap& m, int sm) { k_tensor_ld<<<1, 64, sm>>>(m, b); }},
      {"k_barsync", [](int* b, const u32*, const CUtensorMap&, int sm) { k_barsync<<<1, 64, sm>>>(b); }},
      {"k_none", [](int* b, const u32*, const CUtensorMap&, int sm) { k_none<<<1, 64, sm>>>(b); }},
  };
  int failures = 0;
  for (const Run& run : runs) {
    check(cudaMemset(bad, 0, sizeof(int)), "memset");
    run.launch(bad, src, map, smem);
    check(cudaGetLastError(), run.name);
    check(cudaDeviceSynchronize(), run.name);
    int h = 0;
    check(cudaMemcpy(&h, bad, sizeof(int), cudaMemcpyDeviceToHost), "copy bad");
    std::printf("%-18s values read wrong: %d\n", run.name, h);
    failures += h != 0;
  }
  return failures == 0 ? 0 : 1;
}
