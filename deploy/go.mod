module github.com/supolka/codemode-gateway/deploy

go 1.26.0

replace github.com/supolka/codemode-gateway => ../
