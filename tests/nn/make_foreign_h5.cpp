// Test fixture: writes a valid HDF5 file that is not a causalflow checkpoint (no `format`
// attribute), for the "foreign HDF5" failure case of the train smoke tests.
#include <vector>

#include "cf/io/hdf5.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  cf::io::write_hdf5_atomic(argv[1], [](cf::io::File& f) {
    f.write("data", std::vector<float>{1.f, 2.f, 3.f}, cf::io::Shape{3});
    f.set_attr("creator", std::string("someone else"));
  });
  return 0;
}
