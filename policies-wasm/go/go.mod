module modelless/policies

go 1.24
